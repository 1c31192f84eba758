"""The docker-free local API (devstack) over real HTTP: routing, events, workers, status codes."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import requests

from tests.conftest import HTTP_TIMEOUT, RunningApi, item_count


def new_post(url: str) -> str:
    post_id = uuid.uuid4().hex[:12]
    r = requests.post(f"{url}/posts", json={"postId": post_id, "authorId": "alice", "body": "hi"}, timeout=HTTP_TIMEOUT)
    assert r.status_code == 201, r.text
    assert r.headers["Location"] == f"/posts/{post_id}"
    return post_id


def test_curl_flow_from_the_readme(local_api: RunningApi) -> None:
    url = local_api.url
    post = new_post(url)
    assert requests.put(f"{url}/posts/{post}/likes/u1", timeout=HTTP_TIMEOUT).json()["changed"] is True
    assert requests.put(f"{url}/posts/{post}/likes/u1", timeout=HTTP_TIMEOUT).json()["changed"] is False
    assert requests.get(f"{url}/posts/{post}", timeout=HTTP_TIMEOUT).json()["likeTally"] == 1
    assert requests.get(f"{url}/posts/{post}/likes?limit=5", timeout=HTTP_TIMEOUT).json()["likers"][0]["userId"] == "u1"
    quick = {"postId": post, "stored": 1, "counted": 1, "drift": 0, "reason": None}
    assert requests.get(f"{url}/posts/{post}/audit", timeout=HTTP_TIMEOUT).json() == quick
    assert requests.delete(f"{url}/posts/{post}/likes/u1", timeout=HTTP_TIMEOUT).json()["liked"] is False


def test_bad_input_is_a_4xx_json_error_and_writes_nothing(local_api: RunningApi, ddb: Any) -> None:
    url = local_api.url
    post = new_post(url)
    before = item_count(ddb, local_api.table)
    cases = [
        ("POST", "/posts", {"data": "{not json", "headers": {"Content-Type": "application/json"}}, 400, "invalid_json"),
        ("POST", "/posts", {"json": {"authorId": "a", "body": "x", "extra": 1}}, 400, "validation_error"),
        ("POST", "/posts", {"json": {"authorId": 5, "body": "x"}}, 400, "validation_error"),
        ("POST", "/posts", {"json": {"authorId": "a"}}, 400, "validation_error"),
        ("POST", "/posts", {"json": {"authorId": "a", "body": "x" * 5000}}, 400, "validation_error"),
        ("POST", "/posts", {"json": {"postId": "a#b", "authorId": "a", "body": "x"}}, 400, "validation_error"),
        ("POST", "/posts", {"json": ["a", "b"]}, 400, "validation_error"),
        ("PUT", f"/posts/{post}/likes/{'u' * 65}", {}, 400, "validation_error"),
        ("PUT", f"/posts/{post}/likes/a%23b", {}, 400, "validation_error"),
        ("GET", f"/posts/{post}/likes?limit=0", {}, 400, "validation_error"),
        ("GET", f"/posts/{post}/likes?limit=abc", {}, 400, "validation_error"),
        ("GET", f"/posts/{post}/likes?cursor=%%%", {}, 400, "invalid_cursor"),
        ("PUT", "/posts/missing/likes/u1", {}, 404, "not_found"),
    ]
    for method, path, kwargs, status, code in cases:
        r = requests.request(method, f"{url}{path}", timeout=HTTP_TIMEOUT, **kwargs)
        assert r.status_code == status, (method, path, r.text)
        assert r.json()["error"] == code, (method, path, r.text)
        assert "Traceback" not in r.text
    assert item_count(ddb, local_api.table) == before  # nothing was written


def test_unknown_routes_answer_like_api_gateway(local_api: RunningApi) -> None:
    url = local_api.url
    assert requests.get(f"{url}/nope", timeout=HTTP_TIMEOUT).status_code == 403
    assert requests.patch(f"{url}/posts/p1", timeout=HTTP_TIMEOUT).status_code == 405


def test_concurrent_http_likes_with_duplicates_are_exact(local_api: RunningApi) -> None:
    """32 client threads over HTTP, every like and unlike sent twice."""
    url = local_api.url
    post = new_post(url)
    ops = [("PUT", f"u{i % 50}") for i in range(150)] + [("DELETE", f"u{i}") for i in range(0, 50, 3)]
    ops = [op for op in ops for _ in range(2)]

    def send(op: tuple[str, str]) -> int:
        method, user = op
        return requests.request(method, f"{url}/posts/{post}/likes/{user}", timeout=HTTP_TIMEOUT).status_code

    with ThreadPoolExecutor(max_workers=32) as pool:
        statuses = list(pool.map(send, ops))
    assert set(statuses) == {200}
    audit = requests.get(f"{url}/posts/{post}/audit", timeout=HTTP_TIMEOUT).json()
    assert audit["drift"] == 0
    assert audit["stored"] == requests.get(f"{url}/posts/{post}", timeout=HTTP_TIMEOUT).json()["likeTally"]
