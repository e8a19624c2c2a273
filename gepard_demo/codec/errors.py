"""The one error type the codec package raises for anything wrong with a codec source."""


class CodecLoadError(RuntimeError):
    """A codec could not be found, read or built; the message says what to do about it."""
