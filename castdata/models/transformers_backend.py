"""`backend: transformers`: local generation with the tokenizer's chat template (extra `castdata[train]`).

For small local runs and for tests with a tiny model: one generation at a time, in a worker thread.
Generated text is parsed with the Qwen3/hermes `<tool_call>` parser. A JSON schema is asked for in a system
message, not enforced.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

from castdata.errors import ConfigError
from castdata.models.base import Reply
from castdata.models.chat import ChatBackend, ChatCall
from castdata.models.spec import ModelSpec


class TransformersBackend(ChatBackend):
    """`spec.model` is a local directory or a Hub id. Options: `traits`, `dtype` (default `auto`),
    `device` (default `cpu`)."""

    OPTIONS = ChatBackend.OPTIONS | {"dtype", "device"}

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__(spec)
        try:
            import torch
            import transformers
        except ImportError:
            raise ConfigError(
                "backend: 'transformers' needs torch and transformers: pip install 'castdata[train]'"
            ) from None
        self.torch = torch
        self.device = spec.options.get("device", "cpu")
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(spec.model)
        model = transformers.AutoModelForCausalLM.from_pretrained(spec.model, dtype=spec.options.get("dtype", "auto"))
        self.model = model.to(self.device).eval()
        self.lock = threading.Lock()

    async def _complete(self, call: ChatCall) -> Reply:
        messages = call.messages
        if call.json_schema is not None:
            ask = f"Answer with one JSON object that follows this JSON schema:\n{json.dumps(call.json_schema)}"
            messages = [*messages, {"role": "system", "content": ask}]
        return await asyncio.to_thread(self._generate, messages, call.tools, call.seed)

    def _generate(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, seed: int | None) -> Reply:
        sampling = self.spec.sampling
        started = time.perf_counter()
        inputs = self.tokenizer.apply_chat_template(
            messages,
            tools=tools,
            add_generation_prompt=True,
            return_dict=True,
            return_tensors="pt",
            **self.spec.chat_template_kwargs,
        ).to(self.device)
        options: dict[str, Any] = {"do_sample": False}
        if sampling.temperature > 0:
            options = {"do_sample": True, "temperature": sampling.temperature, "top_p": sampling.top_p}
        with self.lock, self.torch.inference_mode():
            if seed is not None:
                self.torch.manual_seed(seed)
            output = self.model.generate(**inputs, max_new_tokens=sampling.max_tokens, **options)
        prompt_length = inputs["input_ids"].shape[1]
        new_tokens = output[0, prompt_length:]
        text = self.tokenizer.decode(new_tokens, skip_special_tokens=True)
        return self.text_reply(text, prompt_length, len(new_tokens), started)
