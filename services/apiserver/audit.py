"""The audit log: one audit.k8s.io/v1 ``Event`` JSON line per request stage, as kube-apiserver writes.

Why: who did what, when, and with what answer, is the first question after an incident, and
tools that read Kubernetes' audit log must read kubelite's. With ``--audit-policy-file`` and
``--audit-log-path`` (``-`` = stdout) every request that reaches the apiserver — refused ones
included (401, 403, 429) — is weighed by the policy (``audit_policy``) and, unless its level is
None, written as an ``Event``: ``auditID`` (also the ``Audit-Id`` response header; a client's
own ``Audit-ID`` header is kept), stage, ``requestURI``, verb, user, ``sourceIPs``,
``userAgent``, ``objectRef``, ``responseStatus`` (with the Status message of a failure), the
request and response bodies at the Request / RequestResponse levels, the two timestamps, and
the authorization decision as the ``authorization.k8s.io/decision`` and ``.../reason``
annotations when the authorizer recorded one (``request[AUTHZ_DECISION]``), and the annotations
admission added (``annotate``: webhooks' ``auditAnnotations``, ValidatingAdmissionPolicies'
``auditAnnotations`` and ``Audit`` failures).

Stages: ``RequestReceived`` and, for long-running requests (watches, exec, attach, log,
port-forward, proxy), ``ResponseStarted`` are written when the response starts — only then is
the user known, authentication running inside this middleware — and carry the time the request
was received and the time its response started; ``ResponseComplete`` when it ends. A policy's
``omitStages`` leaves stages out.

The middleware is the app's outermost, so it sees the status the error middleware rendered;
``Audit-Id`` is added in ``on_response_prepare``, so streamed responses carry it too.

Writing never blocks the event loop: events are serialised on the loop into a buffer that one
named task (``audit-log-writer``) hands to a thread in batches, writing and flushing each batch
to the file; under load batches grow instead of requests waiting. ``--audit-log-maxsize`` (MiB)
rotates the file to ``<name>-<UTC time>.<ext>`` and ``--audit-log-maxbackup`` keeps that many.

Limits: an apiserver killed with SIGKILL loses the events not yet written — at most those of
the last ``BATCH_INTERVAL`` (20 ms) and one batch write; a clean stop flushes everything.
Requests aiohttp refuses before routing (malformed HTTP) are not audited.

Impersonation: as in Kubernetes, ``user`` is who sent the request (the impersonator, also the
user the policy weighs) and ``impersonatedUser`` whom it acted as; a refused impersonation has
no ``impersonatedUser`` and the ``forbid`` decision of the check that refused it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from api.meta import now_micro_time
from services.apiserver.audit_policy import PolicyChecker, Verdict
from services.apiserver.codec import REQUEST_BODY, dumps, loads
from services.apiserver.identity import Decision, UserInfo, request_user
from services.apiserver.impersonation import impersonator
from services.apiserver.inflight import LONG_RUNNING_SUBRESOURCES
from services.apiserver.request_info import RequestInfo, attributes_for, request_info

__all__ = ["AUDIT", "AUTHZ_DECISION", "AuditLog", "AuditWriter", "annotate", "setup_audit"]

log = logging.getLogger(__name__)

AUTHZ_DECISION: web.RequestKey[tuple[Decision, str]] = web.RequestKey("authz_decision")
"""Where the authorizer leaves ``(Decision, reason)`` for the audit annotations."""

ADMISSION_ANNOTATIONS: web.RequestKey[dict[str, str]] = web.RequestKey("admission_annotations")
"""Audit annotations admission added to this request (``annotate``)."""


def annotate(request: web.Request, key: str, value: str) -> None:
    """Add an audit annotation to this request's events; the first value of a key stays (as
    Kubernetes' ``AddAnnotation`` keeps it)."""
    request.setdefault(ADMISSION_ANNOTATIONS, {}).setdefault(key, value)


_MIB = 1024 * 1024
BATCH_INTERVAL = 0.02
"""Seconds between batch writes: at most 50 thread hand-offs a second however busy the
server is, and no event waits longer than this plus one write before it is on disk."""


class AuditWriter:
    """JSON lines to a file (or stdout), written and flushed by a thread in batches."""

    def __init__(self, path: str, *, max_size_mb: int = 0, max_backups: int = 0) -> None:
        self.path = None if path == "-" else Path(path)
        self.max_size = max_size_mb * _MIB
        self.max_backups = max_backups
        self._pending: list[bytes] = []
        self._wake = asyncio.Event()
        self._closing = False
        self._file: IO[bytes] = sys.stdout.buffer if self.path is None else self._open()

    def _open(self) -> IO[bytes]:
        assert self.path is not None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        return os.fdopen(fd, "ab")

    def write(self, line: bytes) -> None:
        """Queue one line (ending in a newline); the writer task writes it soon."""
        self._pending.append(line)
        self._wake.set()

    async def run(self) -> None:
        """The writer task: each wake-up, the lines queued so far go out as one batch."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            batch, self._pending = self._pending, []
            if batch:
                await asyncio.to_thread(self._write, batch)
            if self._closing:
                if not self._pending:
                    return
                continue
            await asyncio.sleep(BATCH_INTERVAL)  # let the next batch gather: one thread hop

    def close(self) -> None:
        """Let the writer task drain the queue and end (call once it was started)."""
        self._closing = True
        self._wake.set()

    def finish(self) -> None:
        """Write what is still queued (the writer task has ended) and close the file."""
        if self._pending:
            self._write(self._pending)
            self._pending = []
        if self.path is not None:
            self._file.close()

    def _write(self, batch: list[bytes]) -> None:
        data = b"".join(batch)
        if (
            self.path is not None
            and self.max_size
            and self._file.tell() + len(data) > self.max_size
        ):
            self._rotate()
        self._file.write(data)
        self._file.flush()

    def _rotate(self) -> None:
        assert self.path is not None
        self._file.close()
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H-%M-%S.%f")[:-3]
        self.path.rename(self.path.with_name(f"{self.path.stem}-{stamp}{self.path.suffix}"))
        if self.max_backups:
            backups = sorted(self.path.parent.glob(f"{self.path.stem}-*{self.path.suffix}"))
            for old in backups[: -self.max_backups]:
                old.unlink(missing_ok=True)
        self._file = self._open()


@dataclass(slots=True)
class _Record:
    """One request's audit state, from arrival to its last stage."""

    audit_id: str
    received: str
    info: RequestInfo
    verdict: Verdict | None = None
    user: UserInfo | None = None
    impersonated: UserInfo | None = None
    started: str | None = None
    written: set[str] = field(default_factory=set)


def _user(user: UserInfo) -> dict[str, Any]:
    """Kubernetes' ``UserInfo`` JSON; ``{}`` for a request nobody was authenticated for."""
    out: dict[str, Any] = {"username": user.name} if user.name else {}
    if user.uid:
        out["uid"] = user.uid
    if user.groups:
        out["groups"] = list(user.groups)
    if user.extra:
        out["extra"] = {k: list(v) for k, v in user.extra.items()}
    return out


def _object_ref(info: RequestInfo) -> dict[str, str] | None:
    if not info.resource_request:
        return None
    ref = {
        "resource": info.resource,
        "namespace": info.namespace,
        "name": info.name,
        "apiGroup": info.api_group,
        "apiVersion": info.api_version,
        "subresource": info.subresource,
    }
    return {k: v for k, v in ref.items() if v}


def _source_ips(request: web.Request) -> list[str]:
    ips = [ip.strip() for ip in request.headers.get("X-Forwarded-For", "").split(",") if ip.strip()]
    real = request.headers.get("X-Real-Ip", "").strip()
    for ip in (real, request.remote or ""):
        if ip and ip not in ips:
            ips.append(ip)
    return ips


def _json_body(data: bytes | None, *, omit_managed_fields: bool) -> Any:
    if not data:
        return None
    try:
        obj = loads(data)
    except ValueError:
        return None  # not JSON (a protobuf response, say): not logged as an object
    if not isinstance(obj, dict | list):  # a JSON patch is a list
        return None
    if omit_managed_fields and isinstance(obj, dict) and isinstance(obj.get("metadata"), dict):
        obj["metadata"].pop("managedFields", None)
    return obj


def _response_body(response: web.StreamResponse | None) -> bytes | None:
    if isinstance(response, web.Response) and isinstance(response.body, bytes):
        if (response.content_type or "").endswith("json"):
            return response.body
    return None


def _response_status(code: int, body: bytes | None) -> dict[str, Any]:
    if code >= 400:
        status = _json_body(body, omit_managed_fields=False)
        if isinstance(status, dict) and status.get("kind") == "Status":
            status.pop("kind", None)
            status.pop("apiVersion", None)
            return status
    return {"metadata": {}, "code": code}


_RECORD: web.RequestKey[_Record] = web.RequestKey("audit_record", _Record)


class AuditLog:
    """Weighs each request against the policy and writes its events to ``writer``."""

    def __init__(self, checker: PolicyChecker, writer: AuditWriter) -> None:
        self.checker = checker
        self.writer = writer

    def begin(self, request: web.Request) -> _Record:
        info = request_info(request.method, request.path, request.query)
        audit_id = request.headers.get("Audit-ID") or str(uuid.uuid4())
        record = _Record(audit_id=audit_id, received=now_micro_time(), info=info)
        request[_RECORD] = record
        return record

    def _decide(self, request: web.Request, record: _Record) -> Verdict:
        if record.verdict is None:
            sender = impersonator(request)
            record.user = sender or request_user(request)
            record.impersonated = request_user(request) if sender is not None else None
            record.verdict = self.checker.verdict(attributes_for(record.user, record.info))
        return record.verdict

    def started(self, request: web.Request, record: _Record) -> None:
        """The response is starting: RequestReceived, and ResponseStarted if long-running."""
        record.started = now_micro_time()
        if self._decide(request, record).level == "None":
            return
        self._emit(request, record, "RequestReceived", stamp=record.received)
        info = record.info
        if info.verb == "watch" or info.subresource in LONG_RUNNING_SUBRESOURCES:
            self._emit(request, record, "ResponseStarted", stamp=record.started)

    def completed(
        self, request: web.Request, record: _Record, code: int, response: web.StreamResponse | None
    ) -> None:
        verdict = self._decide(request, record)
        if verdict.level == "None":
            return
        if "RequestReceived" not in record.written:
            self._emit(request, record, "RequestReceived", stamp=record.received)
        self._emit(request, record, "ResponseComplete", code=code, response=response)

    def _emit(
        self,
        request: web.Request,
        record: _Record,
        stage: str,
        *,
        stamp: str | None = None,
        code: int | None = None,
        response: web.StreamResponse | None = None,
    ) -> None:
        verdict = record.verdict
        assert verdict is not None and record.user is not None
        record.written.add(stage)
        if stage in verdict.omit_stages:
            return
        event: dict[str, Any] = {
            "kind": "Event",
            "apiVersion": "audit.k8s.io/v1",
            "level": verdict.level,
            "auditID": record.audit_id,
            "stage": stage,
            "requestURI": request.path_qs,
            "verb": record.info.verb,
            "user": _user(record.user),
        }
        if record.impersonated is not None:
            event["impersonatedUser"] = _user(record.impersonated)
        event["sourceIPs"] = _source_ips(request)
        agent = request.headers.get("User-Agent")
        if agent:
            event["userAgent"] = agent
        ref = _object_ref(record.info)
        if ref:
            event["objectRef"] = ref
        body = _response_body(response)
        if code is not None:
            event["responseStatus"] = _response_status(code, body)
        if verdict.at_least("Request"):
            obj = _json_body(
                request.get(REQUEST_BODY), omit_managed_fields=verdict.omit_managed_fields
            )
            if obj is not None:
                event["requestObject"] = obj
        if code is not None and verdict.at_least("RequestResponse"):
            obj = _json_body(body, omit_managed_fields=verdict.omit_managed_fields)
            if obj is not None:
                event["responseObject"] = obj
        event["requestReceivedTimestamp"] = record.received
        event["stageTimestamp"] = stamp or now_micro_time()
        annotations = dict(request.get(ADMISSION_ANNOTATIONS) or {})
        authz = request.get(AUTHZ_DECISION)
        if authz is not None:
            decision, reason = authz
            annotations["authorization.k8s.io/decision"] = (
                "allow" if decision is Decision.ALLOW else "forbid"
            )
            annotations["authorization.k8s.io/reason"] = reason
        if annotations:
            event["annotations"] = annotations
        self.writer.write(dumps(event) + b"\n")


AUDIT: web.AppKey[AuditLog] = web.AppKey("audit_log", AuditLog)


def _middleware(audit: AuditLog) -> Middleware:
    @web.middleware
    async def audit_requests(request: web.Request, handler: Handler) -> web.StreamResponse:
        record = audit.begin(request)
        try:
            response = await handler(request)
        except web.HTTPException as exc:  # a redirect the error middleware lets through
            audit.completed(request, record, exc.status, None)
            raise
        except BaseException:
            audit.completed(request, record, 500, None)
            raise
        audit.completed(request, record, response.status, response)
        return response

    return audit_requests


async def _on_response_prepare(request: web.Request, response: web.StreamResponse) -> None:
    record = request.get(_RECORD)
    if record is not None:
        response.headers["Audit-Id"] = record.audit_id
        if record.started is None and not record.written:  # streamed: the handler still runs
            request.app[AUDIT].started(request, record)


def setup_audit(app: web.Application, audit: AuditLog) -> None:
    """Audit every request of ``app``: call before the app is frozen, its middleware first."""
    app[AUDIT] = audit
    app.middlewares.insert(0, _middleware(audit))
    app.on_response_prepare.append(_on_response_prepare)
    app.cleanup_ctx.append(_writer_lifetime)


async def _writer_lifetime(app: web.Application) -> AsyncIterator[None]:
    writer = app[AUDIT].writer
    task = asyncio.create_task(writer.run(), name="audit-log-writer")
    try:
        yield
    finally:
        writer.close()
        try:
            await task
        finally:
            writer.finish()
