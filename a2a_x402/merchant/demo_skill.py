"""The reference merchant's product: a small, deterministic text-analysis skill.

It is an ordinary a2a-sdk `AgentExecutor` that knows nothing of payments; the payment layer wraps it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping

from a2a.helpers import get_message_text, new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import AgentSkill, Part
from google.protobuf.struct_pb2 import Value

__all__ = ["TEXT_STATS_SKILL", "TextStatsExecutor", "stats_summary", "text_stats"]

TEXT_STATS_SKILL = AgentSkill(
    id="text-stats",
    name="Text statistics",
    description="Counts the words, sentences and characters of a text and lists its most frequent words.",
    tags=["text", "analysis"],
    examples=["The quick brown fox jumps over the lazy dog. The dog sleeps."],
    input_modes=["text/plain"],
    output_modes=["application/json", "text/plain"],
)

_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?", re.UNICODE)
_SENTENCE_END = re.compile(r"[.!?]+(?:\s|$)")


def text_stats(text: str) -> dict[str, int | list[dict[str, str | int]]]:
    """Word, sentence and character counts of `text` and its five most frequent words."""
    words = [w.lower() for w in _WORD.findall(text)]
    sentences = len(_SENTENCE_END.findall(text)) or (1 if text.strip() else 0)
    top: list[dict[str, str | int]] = [
        {"word": word, "count": count} for word, count in Counter(words).most_common(5)
    ]
    return {"words": len(words), "sentences": sentences, "characters": len(text), "topWords": top}


def stats_summary(stats: Mapping[str, object]) -> str:
    """The one-line text of `text_stats`' counts: `7 words, 2 sentences, 36 characters.` (`1 word`, not
    `1 words`)."""
    counts = [
        f"{stats[plural]} {plural if stats[plural] != 1 else plural.removesuffix('s')}"
        for plural in ("words", "sentences", "characters")
    ]
    return ", ".join(counts) + "."


class TextStatsExecutor(AgentExecutor):
    """Answers a text with its statistics, as one artifact with a JSON part and a text part."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Analyse the user's text and complete the task."""
        if context.current_task is None:
            if context.message is None:
                raise ValueError("text-stats needs a message to analyse")
            await event_queue.enqueue_event(new_task_from_user_message(context.message))
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        text = get_message_text(context.message) if context.message is not None else ""
        stats = text_stats(text)
        data = Value()
        data.struct_value.update(stats)
        summary = stats_summary(stats)
        await updater.add_artifact(
            [Part(data=data, media_type="application/json"), Part(text=summary, media_type="text/plain")],
            name="text-stats",
        )
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """The analysis is instantaneous; there is nothing to stop."""
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.cancel()
