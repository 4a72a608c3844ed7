"""Kubeflow Pipelines components for trainctl's jobs.

Import ``trainctl.pipelines.components`` (needs ``kfp``) for the components; the step's
entry point, ``trainctl.pipelines.launch``, needs only trainctl.
"""
