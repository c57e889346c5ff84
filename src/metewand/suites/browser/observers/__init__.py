"""What watches a browser attempt beside its driver: fixture traffic, phase marks, the
collection window, engine resources, harness scope, the settle wait (``base`` for the protocol,
``attempt_registry`` for the list in force). Each observer adds a named block of row fields."""
