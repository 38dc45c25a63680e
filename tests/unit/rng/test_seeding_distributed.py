"""init_random_seed / set_random_seed across 2 real gloo processes on CPU."""

from support.spawn_workers import seeding_worker, spawn_ranks


def test_rank0_seed_is_broadcast_and_diff_rank_seed_adds_rank(tmp_path):
    results = spawn_ranks(seeding_worker, 2, str(tmp_path / 'store'))
    (seed0, diff0, same0, draw0), (seed1, diff1, same1, draw1) = results[0], results[1]
    assert seed0 == seed1
    assert (diff0, diff1) == (seed0, seed0 + 1)
    assert same0 == same1 == seed0 and draw0 == draw1
