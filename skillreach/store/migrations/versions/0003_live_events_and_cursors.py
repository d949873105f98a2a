"""Live usage: the events agents recorded (unique per source and event id) and per-file read cursors.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('live_events',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('source', sa.String(length=512), nullable=False),
    sa.Column('event_id', sa.String(length=256), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('agent', sa.String(length=64), nullable=False),
    sa.Column('session_id', sa.String(length=256), nullable=False),
    sa.Column('prompt_id', sa.String(length=256), nullable=True),
    sa.Column('skill', sa.String(length=256), nullable=True),
    sa.Column('skill_ran', sa.String(length=256), nullable=True),
    sa.Column('success', sa.Boolean(), nullable=True),
    sa.Column('hidden', sa.Boolean(), nullable=False),
    sa.Column('invocation', sa.String(length=32), nullable=True),
    sa.Column('model', sa.String(length=256), nullable=True),
    sa.Column('cwd', sa.Text(), nullable=True),
    sa.Column('git_branch', sa.String(length=256), nullable=True),
    sa.Column('sidechain', sa.Boolean(), nullable=False),
    sa.Column('skill_dir', sa.Text(), nullable=True),
    sa.Column('skill_version', sa.String(length=128), nullable=False),
    sa.Column('prompt_text', sa.Text(), nullable=True),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('source', 'event_id', name='uq_live_event')
    )
    with op.batch_alter_table('live_events', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_live_events_at'), ['at'], unique=False)
        batch_op.create_index(batch_op.f('ix_live_events_skill'), ['skill'], unique=False)

    op.create_table('live_cursors',
    sa.Column('key', sa.String(length=64), nullable=False),
    sa.Column('path', sa.Text(), nullable=False),
    sa.Column('identity', sa.String(length=128), nullable=False),
    sa.Column('head_digest', sa.String(length=80), nullable=False),
    sa.Column('head_len', sa.Integer(), nullable=False),
    sa.Column('offset', sa.BigInteger(), nullable=False),
    sa.Column('lines', sa.BigInteger(), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('key')
    )


def downgrade() -> None:
    op.drop_table('live_cursors')
    with op.batch_alter_table('live_events', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_live_events_skill'))
        batch_op.drop_index(batch_op.f('ix_live_events_at'))
    op.drop_table('live_events')
