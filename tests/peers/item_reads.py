"""Count what a store's item listings return: how a test sees how much of the inbox a loop
(the approval clock, the digest) reads, through the store it really uses."""

from __future__ import annotations

from typing import Any

import pytest

from pizzabot.agent.model import Item


def count_item_reads(store: Any, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """From now on, how many items each `store.list_items` call returned, in order."""
    reads: list[int] = []
    listed = store.list_items

    async def counted(**kw: Any) -> list[Item]:
        found: list[Item] = await listed(**kw)
        reads.append(len(found))
        return found

    monkeypatch.setattr(store, "list_items", counted)
    return reads
