"""The dashboard: per-study skill points, the studies read into them, and the pages' indexes.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('skill_points',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('study_id', sa.String(length=64), nullable=False),
    sa.Column('skill', sa.String(length=200), nullable=False),
    sa.Column('at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('kind', sa.String(length=32), nullable=False),
    sa.Column('model', sa.String(length=128), nullable=False),
    sa.Column('runtime', sa.String(length=64), nullable=False),
    sa.Column('runtime_version', sa.String(length=128), nullable=True),
    sa.Column('corpus_version', sa.String(length=80), nullable=False),
    sa.Column('rubric_version', sa.String(length=80), nullable=True),
    sa.Column('skill_version', sa.String(length=128), nullable=True),
    sa.Column('metrics', sa.JSON(), nullable=False),
    sa.Column('verdict', sa.String(length=32), nullable=True),
    sa.Column('baseline_id', sa.String(length=200), nullable=True),
    sa.Column('lost', sa.JSON(), nullable=False),
    sa.ForeignKeyConstraint(['study_id'], ['studies.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('study_id', 'skill', name='uq_skill_point')
    )
    with op.batch_alter_table('skill_points', schema=None) as batch_op:
        batch_op.create_index('ix_skill_points_skill_at', ['skill', 'at'], unique=False)
        batch_op.create_index(batch_op.f('ix_skill_points_study_id'), ['study_id'], unique=False)

    op.create_table('skill_point_studies',
    sa.Column('study_id', sa.String(length=64), nullable=False),
    sa.Column('indexed_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('points', sa.Integer(), nullable=False),
    sa.Column('note', sa.Text(), nullable=True),
    sa.ForeignKeyConstraint(['study_id'], ['studies.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('study_id')
    )
    with op.batch_alter_table('studies', schema=None) as batch_op:
        batch_op.create_index('ix_studies_created_at', ['created_at'], unique=False)
        batch_op.create_index('ix_studies_kind_created_at', ['kind', 'created_at'], unique=False)
    with op.batch_alter_table('alerts', schema=None) as batch_op:
        batch_op.create_index('ix_alerts_skill_created_at', ['skill', 'created_at'], unique=False)
        batch_op.create_index('ix_alerts_event_study', ['event', 'study_id'], unique=False)
    with op.batch_alter_table('baselines', schema=None) as batch_op:
        batch_op.create_index('ix_baselines_skill_created_at', ['skill', 'created_at'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('baselines', schema=None) as batch_op:
        batch_op.drop_index('ix_baselines_skill_created_at')
    with op.batch_alter_table('alerts', schema=None) as batch_op:
        batch_op.drop_index('ix_alerts_event_study')
        batch_op.drop_index('ix_alerts_skill_created_at')
    with op.batch_alter_table('studies', schema=None) as batch_op:
        batch_op.drop_index('ix_studies_kind_created_at')
        batch_op.drop_index('ix_studies_created_at')
    op.drop_table('skill_point_studies')
    with op.batch_alter_table('skill_points', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_skill_points_study_id'))
        batch_op.drop_index('ix_skill_points_skill_at')
    op.drop_table('skill_points')
