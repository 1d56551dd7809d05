"""memento.tasks."""

__all__: list[str] = []
