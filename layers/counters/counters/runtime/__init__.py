"""The Lambda runtime glue every function shares (needs the `[lambda]` extra): the function's preamble (Powertools Logger and Metrics, settings, the service) and its EMF metrics.

Importing it registers Powertools' event data classes without their ``__init__`` (every event
Powertools knows): [`counters.runtime.light`][counters.runtime.light]."""

from counters.runtime.light import DATA_CLASSES, DATA_CLASSES_KNOWN, light_package

try:
    light_package(DATA_CLASSES, DATA_CLASSES_KNOWN)
except ModuleNotFoundError:
    pass  # without the [lambda] extra: each module of the package says what to install when imported
