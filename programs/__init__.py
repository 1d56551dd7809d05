"""memento.programs."""

__all__: list[str] = []
