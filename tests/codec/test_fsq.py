"""FSQ dequantization and code/token conversion (the NeMo comparison is in tests/codec/test_against_nemo.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.support.codec_fixtures import random_codes, tiny_native
from gepard_demo.codec import NANOCODEC_LAYOUT, FSQLayout, codes_to_tokens, dequantize, tokens_to_codes


def test_layout_is_eight_groups_of_8_7_6_6():
    assert NANOCODEC_LAYOUT.num_codes == 32
    assert NANOCODEC_LAYOUT.levels == (8, 7, 6, 6) * 8


def test_dequantize_values_per_dimension():
    # one frame of all-zeros, one at the centre (L//2) and one at the top code (L-1)
    codes = np.array([[0] * 32, [4, 3, 3, 3] * 8, [7, 6, 5, 5] * 8])
    x = dequantize(codes)
    assert x.dtype == torch.float32 and x.shape == (3, 32)
    assert torch.all(x[0] == -1.0)
    assert torch.all(x[1] == 0.0)
    # integer half: even L stops one step short of +1 (7/4-1 = 0.75, 5/3-1 = 2/3), odd L reaches it
    expected_top = torch.tensor([0.75, 1.0, 2 / 3, 2 / 3] * 8)
    assert torch.allclose(x[2], expected_top, atol=0, rtol=1e-7)


def test_dequantize_keeps_column_order():
    codes = np.array([[4, 3, 3, 3] * 8])
    codes[0, 9] = 0  # group 2, dim 1 (L=7): (0 - 3) / 3
    x = dequantize(codes)
    assert x[0, 9] == -1.0 and torch.count_nonzero(x) == 1


def test_dequantize_accepts_tensor_and_ndarray_alike():
    codes = random_codes(5, seed=3)
    assert torch.equal(dequantize(codes), dequantize(torch.from_numpy(codes)))


@pytest.mark.parametrize(
    "frame, channel, value",
    [(0, 0, 8), (2, 1, 7), (1, 31, 6), (3, 5, -1)],
)
def test_out_of_range_code_names_frame_channel_value_and_range(frame, channel, value):
    codes = random_codes(4, seed=1)
    codes[frame, channel] = value
    with pytest.raises(ValueError) as e:
        dequantize(codes)
    msg = str(e.value)
    level = NANOCODEC_LAYOUT.levels[channel]
    assert f"frame {frame}" in msg and f"channel {channel}" in msg
    assert f"value {value}" in msg and f"0..{level - 1}" in msg


def test_out_of_range_in_a_stream_names_the_absolute_frame():
    codec = tiny_native()
    for mode in ("exact", "lookback"):
        dec = codec.streamer(mode=mode)
        codes = random_codes(6, seed=2)
        dec.push(codes[:4])
        bad = codes[4:].copy()
        bad[1, 3] = 6  # L=6: allowed 0..5
        with pytest.raises(ValueError, match=r"frame 5, channel 3: value 6, allowed 0..5"):
            dec.push(bad)


def test_codec_decode_rejects_bad_codes():
    codec = tiny_native()
    codes = random_codes(3)
    codes[0, 0] = 99
    with pytest.raises(ValueError, match="frame 0, channel 0"):
        codec.decode(codes)
    with pytest.raises(ValueError, match="shape"):
        codec.decode(random_codes(3)[:, :31])
    with pytest.raises(ValueError, match="integers"):
        codec.decode(random_codes(3).astype(np.float32))


def test_tokens_round_trip_and_mixed_radix():
    codes = random_codes(50, seed=4)
    tokens = codes_to_tokens(codes)
    assert tokens.shape == (50, 8)
    assert int(tokens.max()) < 8 * 7 * 6 * 6
    # first dimension least significant, as NeMo's dim_base_index = cumprod([1, 8, 7, 6])
    row = codes[0, :4]
    assert int(tokens[0, 0]) == row[0] + 8 * row[1] + 56 * row[2] + 336 * row[3]
    assert torch.equal(tokens_to_codes(tokens), torch.from_numpy(codes))


def test_single_group_layout_from_plain_fsq_config():
    layout = FSQLayout.from_config(
        {"_target_": "nemo.collections.tts.modules.audio_codec_modules.FiniteScalarQuantizer", "num_levels": [5, 3]}
    )
    assert layout.levels == (5, 3)
    assert torch.allclose(dequantize(np.array([[0, 2]]), layout), torch.tensor([[-1.0, 1.0]]))
