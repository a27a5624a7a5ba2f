"""llama.cpp's side of `runcell bench llm`: load a GGUF with llama-cpp-python,
render the chat messages read from stdin (JSON list) with the GGUF's own chat
template, generate greedily and print one JSON line of timings.

    python bench-llama-cpp.py MODEL.gguf THREADS MAX_TOKENS < messages.json
"""
import json
import sys
import time

import llama_cpp


def main() -> None:
    model, threads, max_tokens = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    messages = json.load(sys.stdin)
    started = time.perf_counter()
    llm = llama_cpp.Llama(
        model_path=model, n_ctx=4096, n_threads=threads, n_threads_batch=threads,
        verbose=False,
    )
    load_s = time.perf_counter() - started
    formatter = llama_cpp.llama_chat_format.Jinja2ChatFormatter(
        template=llm.metadata["tokenizer.chat_template"],
        eos_token=llm.detokenize([llm.token_eos()]).decode(),
        bos_token=llm.detokenize([llm.token_bos()]).decode(),
    )
    prompt = formatter(messages=messages).prompt
    tokens = llm.tokenize(prompt.encode(), add_bos=False, special=True)

    started = time.perf_counter()
    llm.eval(tokens)
    prefill_s = time.perf_counter() - started

    generated = 0
    started = time.perf_counter()
    eos = llm.token_eos()
    for _ in range(max_tokens):
        token = llm.sample(temp=0.0)
        if token == eos or llm.detokenize([token]) in (b"<|im_end|>", b"<|endoftext|>"):
            break
        llm.eval([token])
        generated += 1
    generation_s = time.perf_counter() - started

    print(json.dumps({
        "load_s": load_s,
        "prompt_tokens": len(tokens),
        "prefill_s": prefill_s,
        "generated_tokens": generated,
        "generation_s": generation_s,
    }))


if __name__ == "__main__":
    main()
