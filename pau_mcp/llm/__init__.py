"""The LLM client layer: one way to ask any model, whatever its provider.

Models are named ``provider/model``: ``openai/<model>`` for OpenAI or any
OpenAI-compatible server (``OPENAI_BASE_URL``), ``azure/<deployment>`` for
Azure OpenAI, ``anthropic/<model>`` for Claude, each through its official SDK.
One module per job: ``models`` (model strings, capabilities, overrides),
``replies`` (what came back, and JSON read depth-limited), ``pricing``, ``cache``,
``bounds`` (the size cap on every reply's body), ``provider`` (what the adapters
share), ``openai`` and ``anthropic`` (the adapters), ``client`` (``LLMClient``:
limits, retries, deadlines, cache, accounting, preflight).
"""

from .cache import ResponseCache
from .client import LLMClient
from .errors import LLMError, LLMNotConfigured
from .models import (
    DEFAULT_CAPABILITIES,
    EFFORTS,
    PROVIDERS,
    Capabilities,
    CapabilityTable,
    ModelDates,
    Overrides,
    parse_model,
)
from .pricing import DEFAULT_PRICING, Price, Pricing, Spend
from .replies import Completion, ToolCall, Usage, read_json

__all__ = [
    "DEFAULT_CAPABILITIES",
    "DEFAULT_PRICING",
    "EFFORTS",
    "PROVIDERS",
    "Capabilities",
    "CapabilityTable",
    "Completion",
    "LLMClient",
    "LLMError",
    "LLMNotConfigured",
    "ModelDates",
    "Overrides",
    "Price",
    "Pricing",
    "ResponseCache",
    "Spend",
    "ToolCall",
    "Usage",
    "parse_model",
    "read_json",
]
