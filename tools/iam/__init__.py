"""Each function's DynamoDB/SQS actions, derived from its code, against what template.yaml grants.

``python -m tools.iam`` (``make iam``) prints a table per function and exits non-zero on a
mismatch; tests/tooling/test_iam_derived.py asserts the same on the real template, and
tests/tooling/test_iam_tool.py tests the analysis on small programs.

What is derived
    For every ``AWS::Serverless::Function``: the boto3 operations its code can reach, from its
    handler module (``CodeUri`` + ``Handler``) through the packages of its layers, mapped to IAM
    (``.get_item`` -> ``dynamodb:GetItem``, ``.send_message_batch`` -> ``sqs:SendMessage``).
    TransactWriteItems is authorised per item (AWS, "Using IAM with DynamoDB transactions":
    Put/Update/Delete/Get are governed by PutItem/UpdateItem/DeleteItem/GetItem, ConditionCheck
    by dynamodb:ConditionCheckItem): the kinds are the ``"Put"``/``"Update"``/``"Delete"``/
    ``"ConditionCheck"`` keys of the dict literals in reachable code. TransactGetItems -> GetItem.

How (``ast`` only; nothing is imported or run), one module per step
    * program.py: the parsed modules of one function (its code directory, then its layers),
      names resolved through imports, classes of expressions where every assignment says so.
    * clients.py: which expressions are boto3 clients. Nothing is named in advance: a client is
      ``<x>.client("<service>")`` or flows from one (functions, methods and properties returning
      one, globals and variables assigned one, parameters a call site passes one to), found to
      a fixed point. Moving or renaming the code that makes clients changes nothing here.
    * derive.py: reachability from the handler module, and the actions the reachable operations need.
    * compare.py: the template side (SAM event-source actions, Policies) and the verdicts.
    * aws.py: services in scope, botocore's operations, operation -> IAM action.

Over-approximations (all towards "needed"): every branch of a reachable function counts; a
live class's method is reachable by name from an unknown receiver; transaction kinds are per
function, not per call. The other direction is guarded: an operation-named attribute the
analysis cannot tie to a client is reported (``clients.unrecognised``) and fails the check.
"""
