"""Errors a user can cause. The message is the whole story: it names the file, key or object."""


class TopsailError(Exception):
    """A user-caused error (bad YAML, unknown preset, unreachable cluster, timeout, ...).

    The plugin turns it into one clear message and a non-zero exit, never a bare traceback.
    """
