"""``python -m memento.cli``: the ``memento`` command."""

from memento.cli.app import main

main()
