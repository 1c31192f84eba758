"""The test kit: what tests/, proof/, bench/ and scripts/ use on top of the emulator (:mod:`devstack`).

:mod:`testkit.faults` injects seeded faults into boto3 clients; :mod:`testkit.limits` models
DynamoDB's per-partition limits and TransactionConflict on one; :mod:`testkit.openapi` exports
docs/openapi.json from the handlers' resolvers. The emulator reaches into the kit at one place
only: :mod:`devstack.runtime` attaches a fault injector inside a Lambda worker when a test sets
``DEVSTACK_FAULTS``.
"""
