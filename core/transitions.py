"""What every state table raises when asked for a move it does not allow (corrections.transitions for
corrections and outbox messages, shelf.transitions for units): one exception, so a caller handling any
refused move -- a view answering 409, a command naming it -- catches one thing."""


class InvalidTransition(ValueError):
    """A move a state table does not allow; nothing was written."""
