"""The two ways a model request fails for good: the provider refused it, or it could not be made at all."""

from __future__ import annotations

__all__ = ["LLMError", "LLMNotConfigured"]


class LLMError(RuntimeError):
    """A model request failed for good; the message carries the provider's own words and what to do next.

    Attributes:
        model: The model string (``provider/model``).
        status: The HTTP status, when the provider answered.
        provider_message: What the provider said, verbatim.
        fatal: True when every further request would fail the same way (bad key,
            unknown model, unreachable server): callers scoring a batch stop.
        too_long: The request was longer than the model's context (what helps depends on the caller: the hint in
            the message is the general one).
        prompt_tokens: The request's tokens, when the server said.
        context_tokens: The model's context, when the server said.
    """

    def __init__(
        self,
        message: str,
        *,
        model: str | None = None,
        status: int | None = None,
        provider_message: str | None = None,
        fatal: bool = False,
        too_long: bool = False,
        prompt_tokens: int | None = None,
        context_tokens: int | None = None,
    ) -> None:
        super().__init__(message)
        self.model = model
        self.status = status
        self.provider_message = provider_message
        self.fatal = fatal
        self.too_long = too_long
        self.prompt_tokens = prompt_tokens
        self.context_tokens = context_tokens


class LLMNotConfigured(LLMError):
    """A model is missing, malformed, or its provider cannot be used here; the message names the setting."""

    def __init__(self, message: str, *, model: str | None = None) -> None:
        super().__init__(message, model=model, fatal=True)
