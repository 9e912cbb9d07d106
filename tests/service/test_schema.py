"""Schemathesis against the live service's own /openapi.json: no request the schema allows (or
that schemathesis derives from it to probe validation) may get a 5xx, and every documented
response must match the schema the service publishes.

The service is started once, as a user would (`hotshard serve`, 2 shards), and the schema is
loaded from it lazily through a fixture (schemathesis' `from_fixture`), so collection needs no
running server. Generation is derandomized and bounded, so a run is repeatable and quick.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    positive_data_acceptance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.service._traffic import serve


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory):
    with serve(tmp_path_factory.mktemp("schema") / "data", "--shards", "2") as svc:
        yield svc


@pytest.fixture(scope="module")
def api_schema(service):
    return schemathesis.openapi.from_url(service.url + "/openapi.json", timeout=30)


@pytest.fixture(autouse=True)
def _nodeid_for_schemathesis(request: pytest.FixtureRequest) -> None:
    # schemathesis 4.32's lazy runner reads and rewrites `request.node._nodeid`, an attribute
    # pytest 9.2 no longer has (node ids moved to `_id`): without this it fails with
    # AttributeError before sending a request. Seeding it only lets that code run; the id
    # pytest reports is unchanged.
    if not hasattr(request.node, "_nodeid"):
        request.node._nodeid = request.node.nodeid


schema = schemathesis.pytest.from_fixture("api_schema")


@pytest.mark.slow
@schema.parametrize()
@settings(max_examples=40, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
def test_api_conforms(case, service):
    # as the operator: with the admin token (the admin routes' refusals have their own tests)
    case.call_and_validate(headers=service.admin_headers,
                           checks=[not_a_server_error, response_schema_conformance,
                                   status_code_conformance, content_type_conformance,
                                   positive_data_acceptance],
                           timeout=30)
