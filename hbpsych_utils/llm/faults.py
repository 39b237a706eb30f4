"""The fault kinds a profile may ask the provider simulator to inject (``llm.faults``).

Kept apart from :mod:`hbpsych_utils.llm.testing` (the simulator, which needs aiohttp) so that a
profile's faults are checked when it loads without importing the simulator.
"""

from __future__ import annotations

STOP_FAULT_KINDS: tuple[str, ...] = (
    "quota", "invalid_key", "account_disabled", "location_unsupported", "model_not_found",
)
"""Faults that no retry cures: each provider's own error for the account-level cause, which
stops a run after one call. ``quota`` the out-of-money error (OpenAI 429
``insufficient_quota``; Anthropic's credit-balance 400; Gemini a 429 naming a per-day quota);
``invalid_key`` (OpenAI 401 ``invalid_api_key``; Anthropic 401 ``authentication_error``;
Gemini 400 ``INVALID_ARGUMENT`` whose ``ErrorInfo`` reason is ``API_KEY_INVALID``);
``account_disabled`` (OpenAI 401 ``account_deactivated``; Anthropic's 400
``invalid_request_error`` "This organization has been disabled."; Gemini 403
``PERMISSION_DENIED``, reason ``CONSUMER_SUSPENDED``); ``location_unsupported`` (OpenAI 403
``unsupported_country_region_territory``; Anthropic's 403 ``forbidden`` "Request not allowed";
Gemini 400 ``FAILED_PRECONDITION`` "User location is not supported for the API use.");
``model_not_found`` (OpenAI 404 ``model_not_found``; Anthropic 404 ``not_found_error`` "model:
<id>"; Gemini 404 ``NOT_FOUND`` "models/<id> is not found for API version v1beta ...")."""
SYNC_FAULT_KINDS: tuple[str, ...] = (
    "http_500", "http_503", "reset", "timeout", "malformed", "truncated", "refusal",
    "content_filter", "empty", "rate_limit", "garbled", "no_verdict", "overloaded",
    "reasoning_at_cap", "quoted_request", *STOP_FAULT_KINDS,
)
"""Faults of one model call (sync, or the answer of one batch item). Each gives the provider's
real shape: ``rate_limit`` a 429 (OpenAI: ``rate_limit_exceeded`` with ``retry-after-ms``;
Anthropic: ``rate_limit_error`` with an integer ``retry-after``; Gemini: ``RESOURCE_EXHAUSTED``
naming a per-minute quota, no header, ``RetryInfo`` after a long message and two other details);
the :data:`STOP_FAULT_KINDS`; ``quoted_request`` a 400 that fails this request only, whose message
quotes the request's last user message after the provider's own words, as validation errors,
proxies and OpenAI-compatible servers may (OpenAI ``invalid_request_error`` / ``invalid_value``
naming the ``param``; Anthropic ``invalid_request_error``; Gemini ``INVALID_ARGUMENT`` with a
``BadRequest`` field violation); ``overloaded`` Anthropic's 529 ``overloaded_error``,
503 elsewhere; ``refusal`` the refusal as the request's kind gets it: OpenAI on a Structured
Outputs request ``message.refusal`` with ``content: null`` and ``finish_reason: stop``, on a plain
chat request an ordinary reply that refuses in words (OpenAI sets ``refusal`` for Structured
Outputs only), Anthropic ``stop_reason: refusal``, Gemini ``finishReason: SAFETY``;
``content_filter`` the provider's filter withholding the reply, on any request: OpenAI and
OpenAI-compatible APIs ``finish_reason: content_filter`` with ``content: null``, Anthropic and
Gemini their refusal stops as above; ``reasoning_at_cap`` a reply whose
reasoning used the whole output cap (no text; finish ``length`` / ``max_tokens`` /
``MAX_TOKENS``; reasoning tokens = the cap)."""
BATCH_ITEM_FAULT_KINDS: tuple[str, ...] = ("batch_item_error", "batch_item_missing")
"""Faults of one batch item: errored, or absent from the results (Anthropic, which writes a line
for every request, reports it ``expired``; OpenAI an error-file line with ``response: null``)."""
COLLECT_FAULT_KINDS: tuple[str, ...] = (
    "batch_status_error", "batch_results_error", "batch_results_reset",
    "batch_results_truncated",
)
"""Faults of the steps that collect a batch, one endpoint call each (``times`` counts calls):
the status endpoint answers 503 (``batch_status_error``); the results endpoint — OpenAI's file
content, Anthropic's results stream, Gemini's fetch of a finished batch — answers 503, resets the
connection, or sends half of its body."""
BATCH_END_FAULT_KINDS: tuple[str, ...] = ("batch_expired", "batch_cancelled", "batch_failed")
"""A batch that ends otherwise than completed: expired or cancelled with half of its items
processed (the rest reported as such), or failed (OpenAI, Gemini: nothing processed)."""
BATCH_FAULT_KINDS: tuple[str, ...] = (
    BATCH_ITEM_FAULT_KINDS + COLLECT_FAULT_KINDS + BATCH_END_FAULT_KINDS)
"""Faults of the batch endpoints and of a batch's items."""
ENDPOINT_FAULT_KINDS = COLLECT_FAULT_KINDS + BATCH_END_FAULT_KINDS
"""Faults that match an endpoint call or a batch (by ``api``), never a model call."""
FAULT_KINDS: tuple[str, ...] = SYNC_FAULT_KINDS + BATCH_FAULT_KINDS
