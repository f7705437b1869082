/* types.c — sizes and names of the types and operations, and fp16/bf16/fp8 conversions
 * (round to nearest even). */
#include <string.h>

#include "symm.h"
#include "symm/impl/half__common.h"

size_t symm_type_size(symm_type_t type)
{
    switch (type) {
#define SYMM_TYPE_SIZE_(e, name, ctype)                                                        \
    case e:                                                                                    \
        return sizeof(ctype);
        SYMM_FOREACH_TYPE(SYMM_TYPE_SIZE_)
#undef SYMM_TYPE_SIZE_
    default:
        return 0;
    }
}

const char *symm_type_name(symm_type_t type)
{
    switch (type) {
#define SYMM_TYPE_NAME_(e, name, ctype)                                                        \
    case e:                                                                                    \
        return #name;
        SYMM_FOREACH_TYPE(SYMM_TYPE_NAME_)
#undef SYMM_TYPE_NAME_
    default:
        return "invalid";
    }
}

const char *symm_op_name(symm_op_t op)
{
    switch (op) {
#define SYMM_OP_NAME_(e, name)                                                                 \
    case e:                                                                                    \
        return #name;
        SYMM_FOREACH_OP(SYMM_OP_NAME_)
#undef SYMM_OP_NAME_
    default:
        return "invalid";
    }
}

float symm_bf16_to_float(uint16_t b)
{
    return symm_half_bf16_to_float(b);
}
uint16_t symm_float_to_bf16(float f)
{
    return symm_half_float_to_bf16(f);
}
float symm_fp16_to_float(uint16_t h)
{
    return symm_half_fp16_to_float(h);
}
uint16_t symm_float_to_fp16(float f)
{
    return symm_half_float_to_fp16(f);
}
float symm_fp8_e4m3_to_float(uint8_t b)
{
    return symm_half_fp8_to_float(0, b);
}
uint8_t symm_float_to_fp8_e4m3(float f)
{
    return symm_half_float_to_fp8(0, f);
}
float symm_fp8_e5m2_to_float(uint8_t b)
{
    return symm_half_fp8_to_float(1, b);
}
uint8_t symm_float_to_fp8_e5m2(float f)
{
    return symm_half_float_to_fp8(1, f);
}
