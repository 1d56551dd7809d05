"""memento.web."""

__all__: list[str] = []
