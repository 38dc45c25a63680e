"""A run's settings and state: which Runners mmrepro acts for, what it knows about each."""
