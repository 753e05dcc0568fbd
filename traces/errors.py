"""The one error type for bad traces and bad workload inputs."""
from __future__ import annotations


class TraceError(ValueError):
    """A trace (or workload input) that cannot be used.

    The message always names the file and the field, and says what was expected, so a user
    can fix the input without reading the code: ``trace.npz: field 'experts': expert id 130
    out of range 0..127 (layer 3, token 17)``.
    """

    def __init__(self, path: object, field: str, message: str):
        self.path = str(path) if path is not None else "<memory>"
        self.field = field
        self.message = message
        super().__init__(f"{self.path}: field '{field}': {message}")
