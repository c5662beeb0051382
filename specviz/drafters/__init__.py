"""Drafters: who proposes the tokens the target checks.

One module per proposer behind the protocol in specviz.decoding.proposal (model.py, ngram.py, traffic.py with its
controller, medusa.py, eagle.py), and this registry: name -> class, whose capabilities, label and one-line
description are class attributes. The CLI, the bench, the app and the trace checker read them here, before anything
slow; the engine is handed a factory and never names a drafter, and no module outside this folder spells a
drafter's name (tests/drafters/test_registry.py). May import: specviz.decoding, specviz.models and the base modules.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from specviz.decoding.batchcache import RowTarget
from specviz.decoding.config import accept_drafters
from specviz.decoding.proposal import DraftContext, Drafter, RowByRow
from specviz.errors import UserError

from . import controller
from .eagle import EagleDrafter
from .medusa import MedusaDrafter
from .model import ModelDrafter
from .ngram import NgramDrafter
from .traffic import ControllerDrafter, TrafficDrafter

DRAFTER_CLASSES = (ModelDrafter, NgramDrafter, MedusaDrafter, EagleDrafter, TrafficDrafter, ControllerDrafter)
REGISTRY: dict[str, type] = {cls.name: cls for cls in DRAFTER_CLASSES}
DEFAULT = ModelDrafter.name  # the sidebar's and the CLI's drafter unless one is chosen: SpecConfig's default
# The drafters bench --stream and the Learning page compare (recorded under these names): the controller and the
# two it chooses between, each alone.
MODEL, TRAFFIC, CONTROLLER = ModelDrafter.name, TrafficDrafter.name, ControllerDrafter.name
NGRAM = NgramDrafter.name  # the lookup without a store (point mass; the tests of a batch use it)
CHOOSERS = tuple(
    name for name, cls in REGISTRY.items() if cls.sources
)  # whose drafts depend on what they saw and timed
ALONE = (MODEL, TRAFFIC)
# The draft heads' kinds (the Heads page trains them; their reports and files are keyed by these names). EAGLE is one
# layer, Medusa K heads.
MEDUSA, EAGLE = MedusaDrafter.name, EagleDrafter.name
HEADS = (MEDUSA, EAGLE)
# Who drafted a round, for the drafters that choose (Draft.source): traffic, the draft model, or traffic then it.
TRAFFIC_SOURCE, MODEL_SOURCE, BOTH_SOURCE = controller.SOURCES
accept_drafters(lambda: tuple(REGISTRY), DEFAULT)  # SpecConfig checks names it cannot import (decoding/ is lower)


class DrafterError(UserError, ValueError):
    """A drafter this pair cannot run."""


def drafter_class(name: str) -> type:
    """The registered class of `name` (its capabilities are class attributes)."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise DrafterError(f"no drafter named {name!r}: choose one of {', '.join(REGISTRY)}") from None


def needs_draft_model(name: str) -> bool:
    return drafter_class(name).needs_draft_model


def with_capability(capability: str) -> tuple[str, ...]:
    """The names of the drafters whose class sets `capability`, in the registry's order."""
    return tuple(name for name, cls in REGISTRY.items() if getattr(cls, capability))


def without_capability(capability: str) -> tuple[str, ...]:
    """The names of the drafters whose class leaves `capability` unset, in the registry's order."""
    return tuple(name for name, cls in REGISTRY.items() if not getattr(cls, capability))


def standalone() -> tuple[str, ...]:
    """The drafters that need nothing but the pair: no traffic store, no trained heads (the Acceptance lab's)."""
    return tuple(n for n, cls in REGISTRY.items() if not (cls.sources or cls.needs_hidden_states))


def label(name: str) -> str:
    """A drafter's short name for a person (the sidebar's radio, tables); the name itself if none is registered."""
    return REGISTRY[name].label if name in REGISTRY else name


def title(name: str, draft: str = "draft model") -> str:
    """Who drafts, in a line of words (the class's title, `draft` for the draft model's name); the name itself if
    none is registered."""
    return REGISTRY[name].title.format(draft=draft) if name in REGISTRY else name


def head_titles() -> dict[str, str]:
    """Each head kind's title ("Medusa heads", "EAGLE head"): the Heads page's and train-heads' words."""
    return {kind: title(kind) for kind in HEADS}


def descriptions(names: bool = False) -> str:
    """Every registered drafter's label (its name, for the command line) and one-line description: a help text."""
    return " ".join(f"{name if names else cls.label}: {cls.description}." for name, cls in REGISTRY.items())


def all_sources() -> tuple[str, ...]:
    """Every source a choosing drafter may name for a round (Draft.source; its class's `sources`), in order."""
    return tuple(dict.fromkeys(source for cls in REGISTRY.values() for source in cls.sources))


def source_label(source: str) -> str:
    """Who drafted a round, in words (RoundEvent.draft_source); the source itself if it has no words."""
    return controller.SOURCE_LABELS.get(source, source)


def model_drafted(name: str, source: str) -> bool:
    """Whether a draft model drafted (some of) a round's tokens, given the round's draft source."""
    cls = drafter_class(name)
    return (cls.needs_draft_model and not cls.sources) or source in cls.model_sources


@dataclass(frozen=True)
class Factory:
    """Makes the named drafter for a run (specviz.decoding.proposal.DrafterFactory)."""

    kind: type
    traffic: Any = None  # the traffic store its traffic part reads; None: the pair's own
    heads: Any = None  # kind -> trained heads the heads' drafters read; None or a kind missing: the target's own

    @property
    def needs_hidden_states(self) -> bool:
        return self.kind.needs_hidden_states

    def __call__(self, context: DraftContext) -> Drafter:
        if self.kind.needs_draft_model and context.pair.draft is None:
            modelless = ", ".join(n for n in REGISTRY if not REGISTRY[n].needs_draft_model)
            raise DrafterError(
                f"this pair has no draft model, which the {self.kind.name} drafter needs: choose one that needs none "
                f"({modelless}), or load a draft model"
            )
        context = replace(context, traffic=self.traffic, heads=self.heads)
        if getattr(self.kind, "batches", False):  # its rows share its forwards: it takes the whole batch
            return self.kind.for_run(context)
        if context.rows == 1:
            return RowByRow([self.kind.for_run(context)])
        # one drafter per row, each reading its row of the batch's target (the heads read its hidden states)
        targets = [RowTarget(context.target, row) for row in range(context.rows)]
        return RowByRow([self.kind.for_run(replace(context, target=t, rows=1)) for t in targets], targets)


def factory(name: str, traffic: Any = None, heads: Any = None) -> Factory:
    """The factory the engine is handed for drafter `name` (traffic: the store the traffic drafters read; heads:
    the trained heads the heads' drafters read, by kind)."""
    return Factory(drafter_class(name), traffic, heads)
