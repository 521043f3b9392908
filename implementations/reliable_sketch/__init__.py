"""The reliable request-reply sketch of ``seeds/reliable-request-reply-sketch.txt`` (queue, server)."""
