"""Kubeflow Pipelines components for trainctl's jobs.

Import ``trainctl.controller.pipelines.components`` (needs ``kfp``) for the components; the step's
entry point, ``trainctl.controller.pipelines.launch``, needs only trainctl.
"""
