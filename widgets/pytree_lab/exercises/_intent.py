"""Page writes limited to intent traits (a local equivalent of the library's intent mixin).

A widget lists `_intent_traits`; a state update from the front end that names any other synced
trait (a verdict, a revealed answer, a solution) is refused, and the kernel's value is sent back.
"""

from __future__ import annotations


class IntentOnly:
    _intent_traits: frozenset[str] = frozenset()

    def set_state(self, sync_data):  # called for state the front end sends
        allowed = {k: v for k, v in sync_data.items() if k in self._intent_traits}
        refused = [k for k in sync_data if k not in self._intent_traits]
        if allowed:
            super().set_state(allowed)
        if refused:
            self.refused_writes = [*getattr(self, "refused_writes", []), *refused][-20:]
            self.send_state([k for k in refused if k in self.keys])
