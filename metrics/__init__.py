"""memento.metrics."""

__all__: list[str] = []
