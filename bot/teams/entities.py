"""The AI-generated label on every message the bot sends, as a Bot Framework middleware.

Teams shows "AI generated" under a message whose ``entities`` hold a schema.org ``Message`` with
``additionalType: ["AIGeneratedContent"]`` (Microsoft's "Add AI label" guidance for bots). The answer's
citations ride on the same entity (:func:`bot.teams.cards.citation_entities`); every other message
(greeting, admin replies, acknowledgements, errors, proactive answers, card updates) gets the bare
label from :class:`AiLabel`, which the adapter installs once, so no send path can forget it.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from typing import Any

from botbuilder.core import Middleware, TurnContext
from botbuilder.schema import Activity, ActivityTypes, Entity

__all__ = ["AI_LABEL", "SCHEMA_MESSAGE", "AiLabel", "SchemaEntity", "label"]

SCHEMA_MESSAGE = "https://schema.org/Message"
#: The bare label: the schema.org ``Message`` entity Teams reads the AI-generated mark from.
AI_LABEL: dict[str, Any] = {"type": SCHEMA_MESSAGE, "@type": "Message", "@context": "https://schema.org", "@id": "",
                            "additionalType": ["AIGeneratedContent"]}


class SchemaEntity(Entity):
    """An ``Entity`` whose extra properties (``@type``, ``citation``, ...) are serialised, as the
    Teams AI entities need; the SDK's ``Entity`` keeps only ``type``."""

    _attribute_map = {**Entity._attribute_map, "additional_properties": {"key": "", "type": "{object}"}}

    @classmethod
    def of(cls, data: dict[str, Any]) -> SchemaEntity:
        """Build from a plain dict (``type`` plus any other keys)."""
        extra = {k: v for k, v in data.items() if k != "type"}
        return cls(type=data["type"], additional_properties=copy.deepcopy(extra))


def label(activity: Activity) -> Activity:
    """Mark a ``message`` activity as AI-generated, in place (other types are left alone).

    An existing schema.org ``Message`` entity (the citations) gains ``AIGeneratedContent`` in its
    ``additionalType``; otherwise the bare :data:`AI_LABEL` is added. Returns the activity.
    """
    if (activity.type or ActivityTypes.message) != ActivityTypes.message:
        return activity
    entities = list(activity.entities or [])
    for i, entity in enumerate(entities):
        if getattr(entity, "type", None) != SCHEMA_MESSAGE:
            continue
        props = {k: v for k, v in {**AI_LABEL, **(getattr(entity, "additional_properties", None) or {})}.items()
                 if k != "type"}
        kinds = list(props.get("additionalType") or [])
        props["additionalType"] = kinds if "AIGeneratedContent" in kinds else [*kinds, "AIGeneratedContent"]
        entities[i] = SchemaEntity(type=SCHEMA_MESSAGE, additional_properties=props)
        activity.entities = entities
        return activity
    activity.entities = [*entities, SchemaEntity.of(AI_LABEL)]
    return activity


class AiLabel(Middleware):
    """Labels every message sent or updated during a turn, proactive turns included."""

    async def on_turn(self, context: TurnContext, logic: Callable[[], Awaitable[Any]]) -> None:
        """Register the send and update hooks, then run the turn."""
        async def on_send(_ctx: TurnContext, activities: list[Activity], next_send: Callable[[], Awaitable[Any]]):
            for activity in activities:
                label(activity)
            return await next_send()

        async def on_update(_ctx: TurnContext, activity: Activity, next_update: Callable[[], Awaitable[Any]]):
            label(activity)
            return await next_update()

        context.on_send_activities(on_send)
        context.on_update_activity(on_update)
        await logic()
