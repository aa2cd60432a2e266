"""The test suite is a package, so that tests import their shared helpers as `tests.helpers.*`
without editing sys.path (pytest puts the repository root on it for a package's conftest)."""
