"""The counters with no SAM and no Lambda: `python quickstart.py TABLE` (endpoint, region and credentials from the environment)."""

import sys

from counters import Likes, NotFound

likes = Likes(sys.argv[1])  # a table with the template's CountersTable layout
post, created = likes.posts.create_post(author_id="alice", body="hello", idempotency_key="quickstart-1")
for user in ("bob", "bob", "carol"):  # bob likes twice: the latest request wins, counted once
    likes.toggling.like(post["postId"], user)
likes.toggling.unlike(post["postId"], "carol")
print(f"created={created} likeTally={likes.posts.get_post(post['postId'])['likeTally']}")  # likeTally=1
try:
    likes.toggling.like("no-such-post", "bob")
except NotFound as error:
    print(f"{error.code}: {error.message}")
