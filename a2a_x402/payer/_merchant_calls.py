"""The payer's requests to one merchant interface, through the a2a-sdk client of its binding.

Every request carries ``A2A-Version`` and ``A2A-Extensions: <EXTENSION_URI>`` (SDK service parameters) and
has a timeout. A signed payment is presented again, the same message, after a transport error (see
`_payer` for why that never pays twice); GetTask is asked again after one too; declining terms is best
effort.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Collection

import httpx
from a2a.client import A2AClientError, Client, ClientCallContext, ClientConfig, ClientFactory
from a2a.client.service_parameters import ServiceParametersFactory, with_a2a_extensions
from a2a.types import AgentCard, GetTaskRequest, SendMessageRequest, Task, TaskState
from a2a.utils.constants import VERSION_HEADER
from a2a.utils.errors import A2AError

from a2a_x402.extension import EXTENSION_URI
from a2a_x402.observability import unreachable_reason

from ._card import Binding
from ._errors import MerchantError, MerchantUnreachableError, PaymentPendingError
from ._messages import decline_message
from ._settings import PayerSettings
from ._stages import PaymentStage, StageKind, TaskView, transaction_of

__all__ = ["MerchantCalls", "client_failure"]

logger = logging.getLogger(__name__)


class MerchantCalls:
    """The SDK clients for one merchant interface (a streaming one too if the card declares streaming)
    and the call context every request carries: ``protocol_version`` is the interface's."""

    def __init__(
        self,
        card: AgentCard,
        http: httpx.AsyncClient,
        binding: Binding,
        *,
        protocol_version: str,
        settings: PayerSettings,
    ) -> None:
        self._settings = settings
        self._client = _client_for(card, http, binding, streaming=False)
        self._stream_client = (
            _client_for(card, http, binding, streaming=True) if card.capabilities.streaming else None
        )
        version = ".".join(protocol_version.split(".")[:2])
        parameters = ServiceParametersFactory.create([with_a2a_extensions([EXTENSION_URI])])
        parameters[VERSION_HEADER] = version
        self._context = ClientCallContext(timeout=settings.request_timeout_s, service_parameters=parameters)

    @property
    def streams(self) -> bool:
        """Whether the merchant can be sent requests over SendStreamingMessage."""
        return self._stream_client is not None

    async def close(self) -> None:
        """Release the SDK clients (not the HTTP client they share)."""
        await self._client.close()
        if self._stream_client is not None:
            await self._stream_client.close()

    async def send(
        self, request: SendMessageRequest, view: TaskView, streaming: bool
    ) -> AsyncIterator[PaymentStage]:
        """Send ``request`` (streamed when ``streaming`` and the card allows it), applying each event."""
        client = self._stream_client if streaming and self._stream_client is not None else self._client
        async for event in client.send_message(request, context=self._context):
            yield view.apply(event)

    async def submit(
        self, request: SendMessageRequest, view: TaskView, streaming: bool
    ) -> AsyncIterator[PaymentStage]:
        """Present the signed payment, again (the same message) after transport errors; learn the outcome."""
        attempts = self._settings.submit_attempts
        for attempt in range(1, attempts + 1):
            answered = False
            try:
                async for stage in self.send(request, view, streaming):
                    answered = True
                    yield stage
                return
            except A2AClientError as exc:
                logger.warning(
                    "submitting payment for task %s: attempt %d failed: %s", view.task.id, attempt, exc
                )
                if attempt == attempts:
                    break
                yield PaymentStage(
                    StageKind.RESUBMITTED, view.task.id, view.task.status.state, detail=str(exc)
                )
                await asyncio.sleep(self._settings.retry_backoff_s * attempt)
            except A2AError as exc:
                if attempt == 1 and not answered:
                    raise MerchantError(
                        f"the merchant refused the payment: {exc}", task_id=view.task.id, signed=True
                    ) from exc
                # The payment was taken (this stream had begun, or an earlier presentation arrived and the
                # task moved on): the task tells the outcome.
                logger.info("payment for task %s: %s; asking for the task", view.task.id, exc)
                break
        yield view.replace(await self.get_task(view.task.id))

    async def wait(self, view: TaskView, running: Collection[TaskState]) -> AsyncIterator[PaymentStage]:
        """Poll GetTask until the task leaves the ``running`` states, yielding each status change.

        Raises:
            PaymentPendingError: it was still running after ``pending_timeout_s``.
        """
        deadline = time.monotonic() + self._settings.pending_timeout_s
        while view.task.status.state in running:
            if time.monotonic() >= deadline:
                raise PaymentPendingError(
                    f"the task was still {TaskState.Name(view.task.status.state)} "
                    f"after {self._settings.pending_timeout_s} s",
                    task_id=view.task.id,
                    transaction=transaction_of(view.payment),
                )
            await asyncio.sleep(self._settings.poll_interval_s)
            task = await self.get_task(view.task.id)
            changed = task.status != view.task.status
            stage = view.replace(task)
            if changed:
                yield stage

    async def get_task(self, task_id: str) -> Task:
        """GetTask, again after transport errors."""
        attempts = self._settings.submit_attempts
        for attempt in range(1, attempts + 1):
            try:
                return await self._client.get_task(GetTaskRequest(id=task_id), context=self._context)
            except A2AClientError as exc:
                if attempt == attempts:
                    raise MerchantUnreachableError(
                        f"asking for task {task_id} failed: {exc}", task_id=task_id, signed=True
                    ) from exc
                await asyncio.sleep(self._settings.retry_backoff_s * attempt)
            except A2AError as exc:
                raise MerchantError(
                    f"GetTask for {task_id} failed: {exc}", task_id=task_id, signed=True
                ) from exc
        raise RuntimeError("unreachable: the last attempt returns or raises")

    async def decline(self, task: Task) -> None:
        """Tell the merchant the terms are declined (best effort: the refusal stands either way)."""
        message = decline_message(task)
        try:
            async for _ in self._client.send_message(
                SendMessageRequest(message=message), context=self._context
            ):
                pass
        except A2AError as exc:
            logger.warning("declining the terms of task %s failed: %s", task.id, exc)


def _client_for(card: AgentCard, http: httpx.AsyncClient, binding: Binding, *, streaming: bool) -> Client:
    config = ClientConfig(
        httpx_client=http, supported_protocol_bindings=[binding.protocol], streaming=streaming
    )
    return ClientFactory(config).create(card)


def client_failure(exc: A2AClientError) -> str:
    """The SDK's client error in words: a request that got no answer says so and why (the SDK's own text
    is "Network communication error: " and httpx's, "All connection attempts failed" for a closed port)."""
    if isinstance(exc.__cause__, httpx.TransportError):
        return f"the merchant could not be reached ({unreachable_reason(exc.__cause__)})"
    return str(exc)
