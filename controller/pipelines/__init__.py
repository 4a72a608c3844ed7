"""Kubeflow Pipelines components for trainctl's jobs.

Import ``controller.pipelines.components`` (needs ``kfp``) for the components; the step's
entry point, ``controller.pipelines.launch``, needs only trainctl.
"""
