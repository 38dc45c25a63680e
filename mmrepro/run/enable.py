"""Which Runners mmrepro acts for: those whose config asks for it.

A Runner is mmrepro's (:class:`~mmrepro.runner.ReproRunner`) where its config names it
(``runner_type``) or enables mmrepro, exactly as README shows it: ``custom_imports``
naming ``mmrepro`` (or a submodule), or ``ReproducibilityHook`` in ``custom_hooks`` (of
the config, or of the keyword arguments of a Runner built in Python;
:mod:`mmrepro.runner.entry`). Every other Runner is MMEngine's, unchanged.
"""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

#: The names under which a config may list ``ReproducibilityHook``.
HOOK_NAMES = ('ReproducibilityHook', 'mmrepro.ReproducibilityHook')


def enabled_by_config(cfg: Any) -> bool:
    """Whether a Runner config enables mmrepro (see the module docstring)."""
    if cfg is None:
        return False
    imports = (cfg.get('custom_imports') or {}).get('imports') or []
    if isinstance(imports, str):
        imports = [imports]
    if any(str(name) == 'mmrepro' or str(name).startswith('mmrepro.') for name in imports):
        return True
    return any(is_reproducibility_hook(hook) for hook in cfg.get('custom_hooks') or [])


def is_reproducibility_hook(hook: Any) -> bool:
    """Whether a ``custom_hooks`` entry (config dict, class or instance) is mmrepro's hook."""
    kind = hook.get('type') if isinstance(hook, dict) else hook
    return (kind in HOOK_NAMES or getattr(kind, '__name__', None) == HOOK_NAMES[0]
            or type(kind).__name__ == HOOK_NAMES[0])


def enable_in_config(custom_imports: Any, custom_hooks: Any,
                     **hook_options: Any) -> Tuple[Dict[str, Any], List[Any], bool]:
    """A config's ``custom_imports`` and ``custom_hooks``, made to enable mmrepro.

    ``'mmrepro'`` is appended to the imports when they do not name it
    (``allow_failed_imports`` defaults to False, as in MMEngine), and
    ``dict(type='ReproducibilityHook', **hook_options)`` to the hooks when none is
    :func:`is_reproducibility_hook`. The arguments are not modified.

    Args:
        custom_imports: The config's ``custom_imports`` (a dict, ``ConfigDict`` or None).
        custom_hooks: The config's ``custom_hooks`` (a list or None).
        **hook_options: Arguments of the hook added when the config lists none.

    Returns:
        ``(custom_imports, custom_hooks, hook_added)``: new values for the config, and
        whether the hook was appended.
    """
    imports = custom_imports or {}
    imports = dict(imports.to_dict() if hasattr(imports, 'to_dict') else imports)
    names = imports.get('imports') or []
    names = [names] if isinstance(names, str) else list(names)
    imports['imports'] = [*names, *(['mmrepro'] if 'mmrepro' not in names else [])]
    imports.setdefault('allow_failed_imports', False)
    hooks = list(custom_hooks or [])
    added = not any(is_reproducibility_hook(hook) for hook in hooks)
    if added:
        hooks.append(dict(type=HOOK_NAMES[0], **hook_options))
    return imports, hooks, added
