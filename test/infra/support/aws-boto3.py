"""`aws dynamodb <command> [--option value]…` carried out by boto3, as the AWS CLI would.

The operations page's queries are AWS CLI commands. The AWS CLI need not be installed where the tests run, so
this stands in for it: it maps each option to the operation's parameter the way the CLI derives its options
from the same service model (`--key-condition-expression` → KeyConditionExpression; JSON for structures, maps
and lists; a bare flag for a boolean, `--no-…` for false), refuses an option the model does not have, follows
pages as the CLI does, applies `--query` with JMESPath, and prints JSON. Errors print as the CLI prints them,
with exit code 254. Only the parts the page uses: the `dynamodb` service, JSON output.
"""

import json
import os
import re
import sys

import boto3
import jmespath
from botocore.exceptions import ClientError, ParamValidationError

PAGED = {'Query', 'Scan'}


def member_names(shape):
    return {re.sub(r'[^a-z0-9]', '', name.lower()): name for name in shape.members}


def parse(op_model, args):
    by_flag = member_names(op_model.input_shape)
    params, query = {}, None
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith('--'):
            raise SystemExit(f'aws: unexpected argument {arg}')
        flag = arg[2:]
        if flag == 'query':
            query, i = args[i + 1], i + 2
            continue
        if flag == 'output':
            i += 2
            continue
        negated = flag.startswith('no-') and flag[3:].replace('-', '') in by_flag
        key = (flag[3:] if negated else flag).replace('-', '')
        name = by_flag.get(key)
        if name is None:
            raise SystemExit(f'aws: error: unknown option --{flag} for {op_model.name}')
        shape = op_model.input_shape.members[name]
        if shape.type_name == 'boolean':
            params[name], i = not negated, i + 1
            continue
        value, i = args[i + 1], i + 2
        if shape.type_name in ('structure', 'map', 'list'):
            params[name] = json.loads(value)
        elif shape.type_name in ('integer', 'long'):
            params[name] = int(value)
        else:
            params[name] = value
    return params, query


def call(client, op_model, params):
    method = getattr(client, re.sub(r'(?<!^)(?=[A-Z])', '_', op_model.name).lower())
    out = method(**params)
    while op_model.name in PAGED and 'LastEvaluatedKey' in out:
        page = method(**params, ExclusiveStartKey=out['LastEvaluatedKey'])
        out['Items'] = out.get('Items', []) + page.get('Items', [])
        out['Count'] = out.get('Count', 0) + page.get('Count', 0)
        out['ScannedCount'] = out.get('ScannedCount', 0) + page.get('ScannedCount', 0)
        out.pop('LastEvaluatedKey')
        if 'LastEvaluatedKey' in page:
            out['LastEvaluatedKey'] = page['LastEvaluatedKey']
    out.pop('ResponseMetadata', None)
    return out


def main(argv):
    if len(argv) < 2 or argv[0] != 'dynamodb':
        raise SystemExit('aws: only `aws dynamodb <command>` is carried out here')
    # This boto3 predates service endpoint variables; the AWS CLI and newer SDKs read this one themselves.
    client = boto3.client('dynamodb', endpoint_url=os.environ.get('AWS_ENDPOINT_URL_DYNAMODB'))
    operation = ''.join(part.capitalize() for part in argv[1].split('-'))
    op_model = client.meta.service_model.operation_model(operation)
    params, query = parse(op_model, argv[2:])
    try:
        out = call(client, op_model, params)
    except (ClientError, ParamValidationError) as error:
        sys.stderr.write(f'\nAn error occurred: {error}\n')
        return 254
    if query is not None:
        out = jmespath.search(query, out)
    print(json.dumps(out, indent=2, default=str))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
