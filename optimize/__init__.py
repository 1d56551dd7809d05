"""memento.optimize."""

__all__: list[str] = []
