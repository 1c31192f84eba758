"""The Lambda runtime glue every function shares (needs the `[lambda]` extra): the function's preamble (Powertools Logger and Metrics, settings, the service) and its EMF metrics."""
