"""``selfrag serve``: methods behind an OpenAI-compatible API, and a web page that draws their traces.

:func:`selfrag.serve.app.create_app` builds the ASGI application (Starlette;
``selfrag serve`` runs it with uvicorn). Modules: ``settings`` (bind address,
key, limits), ``guard`` (host, key and size checks on every request),
``limits`` (body, question, questions in flight), ``answering`` (a method
per name over one backend and retriever), ``routes_answer`` and
``openai_format`` (the API), ``runs``, ``run_cache`` and ``routes_runs`` (run
directories, parsed once while unchanged), ``connections`` (bounds on
connections whose request does not arrive or whose reply is not read),
``view`` (a trace read into what the page draws), ``static/`` (the page:
plain HTML, CSS and JavaScript, nothing fetched from elsewhere).
"""
