"""The pod grouper: derives a PodGroup (gang) from a pod's top owner, per workload kind.

Pure functions over raw Kubernetes objects (dicts); the caller fetches objects and applies results.

* ``top_owner.owner_chain`` walks ownerReferences up to the top owner.
* ``grouping.group_pod`` picks the grouper for the top owner's kind (``registry``) and returns
  ``model.PodGroupMetadata`` or ``model.GroupingError``.
* ``queues`` and ``priorities`` hold the queue, PriorityClass and preemptibility rules;
  ``queues.explain_missing_queue`` explains a queue that cannot take jobs.
* ``config.GrouperConfig`` holds label keys, the default queue and the known PriorityClasses.
"""
