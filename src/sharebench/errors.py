"""The one error type for what a user can fix."""


class UserError(Exception):
    """A problem the user can fix: bad option, missing node, absent backend.

    The message is one line naming the bad value and what is allowed; the CLI
    prints it without a traceback and exits with status 2. Everything else
    keeps its traceback.
    """

    def __init__(self, message: str):
        message = " ".join(str(message).split())  # always one line
        super().__init__(message)
