"""An open-loop plan: when each request starts, and which task type and sample it sends.

No Django here. A ``Plan`` is an arrival profile, a weighted task mix and a seed; its
``arrivals()`` are the whole schedule, computed before anything is sent, so that the
same plan (same seed) always yields the same sequence of (planned time, task type,
sample), and a shard is a slice of it (``shard(i, n)``: every n-th arrival from i).

Profiles (k6's arrival-rate executors are the model):

- ``constant``: ``rate`` per second for ``duration_s``; arrival k at ``k / rate``
  (k = 0, 1, ...), so ``rate * duration_s`` arrivals when that is a whole number.
- ``poisson``: the same mean rate, exponential gaps drawn from the seed; the first
  arrival is one gap after the start.
- ``ramp``: ``stages`` ``[{duration_s, rate}]``, k6's ramping-arrival-rate: within a
  stage the rate moves *linearly* from the previous stage's rate (``start_rate``, 0 by
  default, for the first) to the stage's own; arrival k is where the integral of the
  rate reaches k. A stage that keeps the previous rate is a plateau.

The mix draws, for each arrival in order, a task type by weight, then one of its
re-runnable samples uniformly, from a random stream seeded apart from the Poisson
gaps (``"<seed>:mix"``), so changing the profile does not reshuffle the mix.
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from replay.client import ChatRequest

MAX_ARRIVALS = 1_000_000  # a plan is held in memory whole: 1 M arrivals is ~150 MB
PROFILES = ("constant", "poisson", "ramp")


class PlanInvalid(ValueError):
    """A plan that cannot run as written: ``errors`` maps each field to what is wrong."""

    def __init__(self, errors: Mapping[str, str]) -> None:
        self.errors = dict(errors)
        super().__init__("; ".join(f"{name}: {message}" for name, message in self.errors.items()))


@dataclass(frozen=True)
class PlanSample:
    """One sample a task type may send; ``rerunnable=False`` samples are never sent."""

    key: str
    request: ChatRequest
    rerunnable: bool = True


@dataclass(frozen=True)
class MixEntry:
    task_type: str
    samples: tuple[PlanSample, ...]
    weight: float

    @property
    def sendable(self) -> tuple[PlanSample, ...]:
        return tuple(s for s in self.samples if s.rerunnable)


@dataclass(frozen=True)
class Stage:
    duration_s: float
    rate: float  # reached at the end of the stage (ramp), or held (constant, poisson)


@dataclass(frozen=True)
class ArrivalProfile:
    kind: Literal["constant", "poisson", "ramp"]
    stages: tuple[Stage, ...]  # one stage for constant and poisson
    start_rate: float = 0.0  # ramp only: the rate the first stage starts from

    @property
    def duration_s(self) -> float:
        return sum(stage.duration_s for stage in self.stages)

    @property
    def peak_rate(self) -> float:
        return max([self.start_rate, *(stage.rate for stage in self.stages)])

    def stage_bounds(self) -> list[tuple[float, float]]:
        """Each stage's [start, end) in seconds from the plan's start."""
        bounds, at = [], 0.0
        for stage in self.stages:
            bounds.append((at, at + stage.duration_s))
            at += stage.duration_s
        return bounds

    def to_json(self) -> dict[str, Any]:
        if self.kind == "ramp":
            return {
                "type": "ramp",
                "start_rate": self.start_rate,
                "stages": [{"duration_s": s.duration_s, "rate": s.rate} for s in self.stages],
            }
        (stage,) = self.stages
        return {"type": self.kind, "rate": stage.rate, "duration_s": stage.duration_s}

    @classmethod
    def from_json(cls, data: Any, *, prefix: str = "arrival") -> ArrivalProfile:
        """Parse ``{"type", "rate", "duration_s"}`` or ``{"type": "ramp", "stages": [...]}``."""
        if not isinstance(data, Mapping):
            raise PlanInvalid({prefix: "must be an object with a type"})
        kind = data.get("type")
        if kind not in PROFILES:
            raise PlanInvalid({f"{prefix}.type": f"{kind!r} is not one of {', '.join(PROFILES)}"})
        errors: dict[str, str] = {}
        if kind == "ramp":
            raw = data.get("stages")
            if not isinstance(raw, list) or not raw:
                raise PlanInvalid({f"{prefix}.stages": "a ramp needs at least one stage"})
            stages = []
            for index, item in enumerate(raw):
                where = f"{prefix}.stages[{index}]"
                if not isinstance(item, Mapping):
                    errors[where] = "must be an object with duration_s and rate"
                    continue
                duration = _number(item.get("duration_s"), f"{where}.duration_s", errors, above=0)
                rate = _number(item.get("rate"), f"{where}.rate", errors, above=None)
                stages.append(Stage(duration, rate))
            start = data.get("start_rate", 0.0)
            start_rate = _number(start, f"{prefix}.start_rate", errors, above=None)
            if errors:
                raise PlanInvalid(errors)
            profile = cls("ramp", tuple(stages), start_rate)
            if profile.peak_rate <= 0:
                raise PlanInvalid({f"{prefix}.stages": "every rate is 0: nothing would be sent"})
            return profile
        if "stages" in data:
            errors[f"{prefix}.stages"] = f"only a ramp has stages; {kind} takes rate and duration_s"
        rate = _number(data.get("rate"), f"{prefix}.rate", errors, above=0)
        duration = _number(data.get("duration_s"), f"{prefix}.duration_s", errors, above=0)
        if errors:
            raise PlanInvalid(errors)
        return cls(kind, (Stage(duration, rate),))


def _number(value: Any, name: str, errors: dict[str, str], *, above: float | None) -> float:
    """``value`` as a finite float; ``above=0``: must be > 0, ``above=None``: must be >= 0."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        errors[name] = "must be a number"
        return 0.0
    if above is not None and value <= above:
        errors[name] = f"must be above {above:g} (got {value:g})"
    elif above is None and value < 0:
        errors[name] = f"must be 0 or more (got {value:g})"
    return float(value)


@dataclass(frozen=True, slots=True)
class Arrival:
    index: int  # position in the whole plan: what shards and merges key on
    offset_s: float  # planned start, seconds after the plan's start
    stage: int
    task_type: str
    mix_index: int
    sample_index: int  # among the entry's re-runnable samples
    sample_key: str


@dataclass(frozen=True)
class Plan:
    profile: ArrivalProfile
    mix: tuple[MixEntry, ...]
    seed: int
    _arrivals: list[Arrival] = field(default_factory=list, repr=False, compare=False)

    def __post_init__(self) -> None:
        errors: dict[str, str] = {}
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            errors["seed"] = "must be a whole number (recorded, so a run can be repeated)"
        if not self.mix:
            errors["mix"] = "needs at least one entry {task_type, samples, weight}"
        seen: set[str] = set()
        total = 0.0
        for index, entry in enumerate(self.mix):
            where = f"mix[{index}]"
            if not isinstance(entry.task_type, str) or not entry.task_type.strip():
                errors[f"{where}.task_type"] = "is required"
            elif entry.task_type in seen:
                errors[f"{where}.task_type"] = f"{entry.task_type!r} appears twice; merge them"
            seen.add(entry.task_type)
            weight = _number(entry.weight, f"{where}.weight", errors, above=None)
            total += weight
            if not entry.sendable:
                held = len(entry.samples)
                why = f"all {held} are marked not re-runnable" if held else "it has none"
                errors[f"{where}.samples"] = (
                    f"no re-runnable sample ({why}); only re-runnable samples are sent: "
                    "add one or drop the entry"
                )
        if self.mix and total <= 0 and not any(k.endswith(".weight") for k in errors):
            errors["mix.weight"] = "the weights add up to 0; give at least one entry a weight > 0"
        expected = self.expected_arrivals()
        if expected > MAX_ARRIVALS:
            errors["arrival"] = (
                f"about {expected:,.0f} arrivals planned; at most {MAX_ARRIVALS:,} per plan "
                "(shorten it or lower the rate)"
            )
        if errors:
            raise PlanInvalid(errors)

    def expected_arrivals(self) -> float:
        """The integral of the rate over the plan (what ``arrivals()`` yields, about)."""
        previous, total = self.profile.start_rate, 0.0
        for stage in self.profile.stages:
            start = previous if self.profile.kind == "ramp" else stage.rate
            total += (start + stage.rate) / 2 * stage.duration_s
            previous = stage.rate
        return total

    def to_json(self) -> dict[str, Any]:
        """What the plan was, to record beside its results (samples by key)."""
        return {
            "seed": self.seed,
            "arrival": self.profile.to_json(),
            "mix": [
                {
                    "task_type": e.task_type,
                    "weight": e.weight,
                    "samples": [s.key for s in e.sendable],
                    "not_rerunnable": [s.key for s in e.samples if not s.rerunnable],
                }
                for e in self.mix
            ],
        }

    def arrivals(self) -> list[Arrival]:
        """The whole schedule, in planned order (computed once, then kept)."""
        if not self._arrivals:
            self._arrivals.extend(self._schedule())
        return self._arrivals

    def shard(self, index: int, count: int) -> list[Arrival]:
        """Shard ``index`` of ``count``: every count-th arrival from ``index``."""
        if count < 1 or not 0 <= index < count:
            raise ValueError(f"shard: {index} of {count} does not exist")
        return self.arrivals()[index::count]

    def _schedule(self) -> list[Arrival]:
        # Reproducible draws from the recorded seed, not secrets: random.Random is right.
        times = list(_offsets(self.profile, random.Random(f"{self.seed}:arrivals")))  # noqa: S311
        draw = random.Random(f"{self.seed}:mix")  # noqa: S311
        weights = [max(0.0, e.weight) for e in self.mix]
        cumulative = [sum(weights[: i + 1]) for i in range(len(weights))]
        total = cumulative[-1]
        pools = [entry.sendable for entry in self.mix]
        arrivals = []
        for index, (offset, stage) in enumerate(times):
            # bisect_right: a weight of 0 is never picked, even when random() is 0.0.
            mix_index = bisect.bisect_right(cumulative, draw.random() * total)
            mix_index = min(mix_index, len(cumulative) - 1)
            pool = pools[mix_index]
            sample_index = draw.randrange(len(pool))
            arrivals.append(
                Arrival(
                    index=index,
                    offset_s=offset,
                    stage=stage,
                    task_type=self.mix[mix_index].task_type,
                    mix_index=mix_index,
                    sample_index=sample_index,
                    sample_key=pool[sample_index].key,
                )
            )
        return arrivals

    def request_for(self, arrival: Arrival) -> ChatRequest:
        return self.mix[arrival.mix_index].sendable[arrival.sample_index].request


def _offsets(profile: ArrivalProfile, gaps: random.Random):
    """(planned offset in seconds, stage index) of every arrival, in order."""
    if profile.kind == "poisson":
        (stage,) = profile.stages
        at = gaps.expovariate(stage.rate)
        while at < stage.duration_s:
            yield at, 0
            at += gaps.expovariate(stage.rate)
        return
    # constant and ramp: arrival k where the integral of the rate reaches k.
    begin, done, previous = 0.0, 0.0, profile.start_rate
    k = 0
    for stage_index, stage in enumerate(profile.stages):
        a = stage.rate if profile.kind == "constant" else previous
        b, d = stage.rate, stage.duration_s
        slope = (b - a) / d
        in_stage = (a + b) / 2 * d  # arrivals this stage carries
        while k < done + in_stage - 1e-9:
            need = k - done
            if abs(slope) < 1e-12:
                t = need / a
            else:
                t = (-a + math.sqrt(max(0.0, a * a + 2 * slope * need))) / slope
            if t >= d:  # rounding at the stage's end: the next stage takes it
                break
            yield begin + t, stage_index
            k += 1
        begin += d
        done += in_stage
        previous = b


def ceiling_problem(plan: Plan, ceiling: int, expected_e2e_s: float) -> str | None:
    """Why ``ceiling`` cannot carry the plan's peak rate at the expected latency, or None.

    Little's law: requests in flight = rate x time in the system. A ceiling below that
    would drop starts by design, so a drill refuses it up front.
    """
    needed = plan.profile.peak_rate * expected_e2e_s
    if ceiling < needed:
        return (
            f"an in-flight ceiling of {ceiling} cannot carry {plan.profile.peak_rate:g}/s at "
            f"{expected_e2e_s:g} s per request (needs at least {math.ceil(needed)})"
        )
    return None


def build_mix(entries: Sequence[Mapping[str, Any]]) -> tuple[MixEntry, ...]:
    """``[{task_type, samples: [PlanSample], weight}]`` as MixEntry tuples (for callers holding dicts)."""
    return tuple(
        MixEntry(str(e.get("task_type") or ""), tuple(e.get("samples") or ()), e.get("weight", 0))
        for e in entries
    )
