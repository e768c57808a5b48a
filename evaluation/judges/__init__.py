"""LLM judges: prompts (prompting), reading answers (parsing), asking one conversation's
questions (conversation), and the engine protocol that runs a judge run (protocol).

Every call goes through the model engine (annotate.engine): its endpoint, client, limiter,
retries and accounting. See docs/engine.md.
"""
