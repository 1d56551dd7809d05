"""memento.signatures."""

__all__: list[str] = []
