"""The emulator: what stands in for AWS on localhost, no Docker (``python -m devstack``, ``make dev``).

API Gateway (:mod:`devstack.api`, Cognito authorizer :mod:`devstack.auth`), the Lambda runtime
(:mod:`devstack.runtime`), SQS (:mod:`devstack.sqs`), the DynamoDB stream's event source mapping
(:mod:`devstack.streams`), DynamoDB Local (:mod:`devstack.dynamodb_local`), all wired by
:mod:`devstack.stack` from what :mod:`devstack.template` reads in template.yaml (the stand-in for
the deployment). The test kit that drives it lives in :mod:`testkit`.
"""
