"""Every view outside DRF answers an EulerError the way DRF's handler does: the same body, and Retry-After when a
throttled or unavailable answer says how long."""

from __future__ import annotations

import json

from euler.errors import EulerError, InvalidInput, QuotaExceeded, Unavailable, error_response, exception_handler


def test_the_body_is_the_code_the_detail_and_the_extra_fields():
    response = error_response(InvalidInput("bad state", code="invalid_state", extra={"allowed": ["queued"]}))
    assert response.status_code == 400
    assert json.loads(response.content) == {"code": "invalid_state", "detail": "bad state", "allowed": ["queued"]}
    assert "Retry-After" not in response


def test_a_throttled_or_unavailable_answer_says_when_to_come_back_and_others_do_not():
    assert error_response(QuotaExceeded("slow down", extra={"retry_after": 7}))["Retry-After"] == "7"
    assert error_response(Unavailable("later", extra={"retry_after": 3}))["Retry-After"] == "3"
    assert "Retry-After" not in error_response(EulerError("no", extra={"retry_after": 3}))  # a 400 does not
    assert "Retry-After" not in error_response(Unavailable("later"))  # no figure, no header


def test_drfs_handler_answers_the_same():
    exc = Unavailable("later", extra={"retry_after": 3})
    drf, plain = exception_handler(exc, {}), error_response(exc)
    assert (drf.status_code, drf.data, drf["Retry-After"]) == (plain.status_code, json.loads(plain.content), "3")
