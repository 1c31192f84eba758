"""Create the counters table: `python create_table.py NAME` (endpoint and Region from the environment)."""

import sys

import botocore.session

name = sys.argv[1]
dynamodb = botocore.session.get_session().create_client("dynamodb")
dynamodb.create_table(
    TableName=name,
    BillingMode="PAY_PER_REQUEST",
    AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"}, {"AttributeName": "SK", "AttributeType": "S"}],
    KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
)
dynamodb.get_waiter("table_exists").wait(TableName=name)
print(f"table {name} created")
