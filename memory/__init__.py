"""memento.memory."""

__all__: list[str] = []
